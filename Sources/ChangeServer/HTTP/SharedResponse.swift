import CHTTPD

/// One libmicrohttpd response, reference-counted by MHD, that can be queued on many connections: the long-poll
/// feed builds a changeset's bytes once and hands the same response to every subscriber waiting for it.
final class SharedResponse {
    let status: HTTPStatus
    fileprivate let pointer: OpaquePointer

    init(_ response: Response) {
        status = response.status
        pointer = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(
                body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        for header in response.headers {
            MHD_add_response_header(pointer, header.name, header.value)
        }
    }

    /// Queues the response on a connection; MHD takes its own reference.
    func queue(on connection: OpaquePointer) -> Bool {
        MHD_queue_response(connection, UInt32(status.rawValue), pointer) == .YES
    }

    deinit { MHD_destroy_response(pointer) }
}

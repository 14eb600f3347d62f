import CHTTPD

/// One libmicrohttpd response, reference-counted by MHD, that can be queued on many connections: the long-poll
/// feed builds a changeset's bytes once and hands the same response to every subscriber waiting for it.
final class SharedResponse {
    let status: HTTPStatus
    fileprivate let pointer: OpaquePointer?
    /// False when MHD could not create the response or refused one of its headers: it must not be sent as it is.
    let isComplete: Bool
    /// Bytes its headers take in a connection's memory pool, as `name: value\r\n`.
    let headerBytes: Int

    init(_ response: Response) {
        status = response.status
        let created: OpaquePointer? = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(
                body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
        }
        pointer = created
        var complete = created != nil
        var bytes = 0
        if let created {
            for header in response.headers {
                complete = complete && MHD_add_response_header(created, header.name, header.value) == .YES
                bytes += header.name.utf8.count + header.value.utf8.count + 4
            }
        }
        isComplete = complete
        headerBytes = bytes
    }

    /// A response of that status with no body and no header of ours: the answer of last resort.
    static func bare(_ status: HTTPStatus) -> SharedResponse {
        SharedResponse(Response(status))
    }

    /// Queues the response on a connection; MHD takes its own reference.
    func queue(on connection: OpaquePointer) -> Bool {
        guard let pointer else { return false }
        return MHD_queue_response(connection, UInt32(status.rawValue), pointer) == .YES
    }

    deinit {
        if let pointer { MHD_destroy_response(pointer) }
    }
}

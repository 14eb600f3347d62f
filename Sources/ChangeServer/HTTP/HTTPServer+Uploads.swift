import CHTTPD
import Glibc

/// Request bodies still arriving: a client that stalls or leaves midway is let go, its connection closed.
///
/// libmicrohttpd times a connection out only after `idleTimeout` (`--idle-timeout`, 120 s by default) without activity,
/// and in epoll mode 0.9.75 can miss a client's hang-up that comes with its last bytes: such a connection sat in
/// `CLOSE-WAIT` for the whole idle timeout, one of `--max-connections` all along. So a body not whole by the end of the
/// loop turn its headers came in (most bodies come with their headers, and cost nothing here) is watched on the loop's
/// epoll for hang-up, as a held poll is, and timed: `--body-timeout` seconds without a byte of it get `408`.
extension HTTPServer {
    /// A request's headers announce a body (loop thread, inside MHD's callbacks).
    func beginUpload(_ exchange: Exchange) {
        exchange.awaitsBody = true
        exchange.bodyProgress = exchange.started
        newUploads.append(exchange)
    }

    /// The body is whole, or the request ended without it: the upload is no longer watched.
    func endUpload(_ exchange: Exchange) {
        exchange.awaitsBody = false
        guard slowUploads.removeValue(forKey: ObjectIdentifier(exchange)) != nil else { return }
        unwatch(exchange)
    }

    /// MHD ended a request whose body was still arriving. A client that hung up (seen by the watch, or by MHD
    /// itself) is logged `499`, as nginx logs a client that gave up, and one a stop ended `444`; MHD's own
    /// refusals of a malformed body are not logged, as before.
    func uploadEnded(_ exchange: Exchange, code: MHD_RequestTerminationCode) {
        endUpload(exchange)
        // `MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN` (3), `_READ_ERROR` (4) and `_CLIENT_ABORT` (5): the constants do
        // not import.
        if exchange.leftMidBody || code.rawValue == 4 || code.rawValue == 5 {
            handler?.didRespond(exchange, status: .clientClosedRequest)
        } else if code.rawValue == 3 {
            handler?.didRespond(exchange, status: .closedWithoutAnswer)
        }
    }

    /// At the end of a loop turn: the uploads that began in it and are not whole yet are watched.
    func watchUploads() {
        let timeout = Int64(options.bodyTimeout) * 1000
        for exchange in newUploads where exchange.awaitsBody {
            slowUploads[ObjectIdentifier(exchange)] = exchange
            watchHangUp(of: exchange)
            let deadline = exchange.bodyProgress + timeout
            nextUploadExpiry = min(nextUploadExpiry ?? deadline, deadline)
        }
        newUploads.removeAll(keepingCapacity: true)
    }

    /// Answers `408` to the uploads that went `--body-timeout` without a byte, and finds the next deadline. A
    /// body's deadline only moves later, so the earliest one noted is a bound and nothing is looked at before it.
    func expireUploads(now: Int64) {
        guard let expiry = nextUploadExpiry, now >= expiry else { return }
        let timeout = Int64(options.bodyTimeout) * 1000
        nextUploadExpiry = nil
        // An upload whose client hung up is being closed (`uploadHungUp`), and logged `499` then.
        for exchange in slowUploads.values.filter({ !$0.leftMidBody }) {
            let deadline = exchange.bodyProgress + timeout
            if deadline <= now {
                timeOut(exchange)
            } else {
                nextUploadExpiry = min(nextUploadExpiry ?? deadline, deadline)
            }
        }
    }

    /// `408` (or the refusal decided from the headers, whose body was being discarded: the client learns why it
    /// was refused), written on the socket (MHD can queue an answer only from its callbacks, which a silent client
    /// never brings), then the writing side shut so the client reads its end; MHD's side is let go: the next call
    /// for the request, if more of it comes, closes it, and else the connection's short timeout does
    /// (`closingTimeout`).
    private func timeOut(_ exchange: Exchange) {
        guard let handler else { return }
        endUpload(exchange)
        releaseBody(of: exchange)
        exchange.leavesLibrary = true
        var response = exchange.refusal ?? handler.response(to: .bodyTimedOut(seconds: options.bodyTimeout))
        response.addHeaders(exchange.extraHeaders)
        _ = sendClosing(response, on: exchange.connection, includingBody: exchange.method != "HEAD")
        let socket = chttpd_connection_fd(exchange.connection)
        if socket >= 0 { shutdown(socket, Int32(SHUT_WR)) }
        _ = chttpd_set_connection_timeout(exchange.connection, closingTimeout)
        handler.didRespond(exchange, status: response.status)
    }

    /// The client of an upload hung up. Its last bytes may have come with the hang-up, and MHD reads them in this
    /// turn, so the request is not ended here; nothing more can come, and the connection's short timeout
    /// (`closingTimeout`) has MHD close it within about a second (`uploadEnded` logs it), where MHD might not notice
    /// the hang-up before its idle timeout.
    func uploadHungUp(_ exchange: Exchange) {
        exchange.leftMidBody = true
        _ = chttpd_set_connection_timeout(exchange.connection, closingTimeout)
    }
}

import Glibc

/// The text of a small file of `/proc` or of the cgroup file system (up to `limit` bytes), nil when it cannot be
/// read. Such a file says its size is 0, so it is read for what comes rather than for its size (as `readFile` does).
func readProcFile(_ path: String, limit: Int = 256) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes = [UInt8](repeating: 0, count: limit)
    let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    return String(decoding: bytes[..<count], as: UTF8.self)
}

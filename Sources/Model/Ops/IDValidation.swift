extension ModelError {
    /// Throws `invalid_id` unless `id` is non-empty and at most `maximumIDByteCount` UTF-8 bytes.
    /// - Complexity: O(1) for native strings.
    static func check(id: String, what: String) throws(ModelError) {
        let count = id.utf8.count
        guard count > 0, count <= maximumIDByteCount else {
            throw ModelError(.invalidID, "\(what) id must be 1 to \(maximumIDByteCount) UTF-8 bytes, got \(count)")
        }
    }
}

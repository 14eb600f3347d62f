import Model

/// Conditional requests: `If-Match` on mutations (`412` when the collection is at another version) and
/// `If-None-Match` on reads (`304`) and on creation (`If-None-Match: *` creates only).
enum Preconditions {
    /// The quoted ETag of a version.
    static func etag(_ version: Version) -> String { "\"\(version)\"" }

    /// Whether a header's list of ETags (or `*`) names `version`; nil `version` when the collection does not exist.
    static func matches(_ header: String, _ version: Version?) -> Bool {
        guard let version else { return false }
        let wanted = version.description
        return header.split(separator: ",").contains { raw in
            var tag = Substring(String(raw).trimmingSpaces())
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tag.hasPrefix("\""), tag.hasSuffix("\""), tag.count >= 2 { tag = tag.dropFirst().dropLast() }
            return tag == wanted
        }
    }

    /// The request's conditions, to be checked when its record is applied.
    static func conditions(_ exchange: Exchange) -> JournalRecord.Conditions {
        JournalRecord.Conditions(ifMatch: exchange.header("If-Match"), ifNoneMatch: exchange.header("If-None-Match"))
    }
}

extension JournalRecord.Conditions {
    /// Throws `412` unless `If-Match` (if any) names `version`, and `If-None-Match` (if any) does not; nil
    /// `version` when the collection does not exist.
    func check(_ version: Version?) throws(HTTPError) {
        if let ifMatch, !Preconditions.matches(ifMatch, version) {
            let current = version.map { " (it is at \($0))" } ?? " (it does not exist)"
            throw HTTPError(
                .preconditionFailed, code: "precondition_failed",
                "If-Match \(ifMatch) does not match the collection's version\(current).")
        }
        if let ifNoneMatch, Preconditions.matches(ifNoneMatch, version) {
            throw HTTPError(
                .preconditionFailed, code: "precondition_failed",
                "If-None-Match \(ifNoneMatch) matches the collection's version \(version.map(\.description) ?? "")")
        }
    }
}

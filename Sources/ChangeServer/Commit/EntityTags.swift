import Model

/// A parsed `If-Match` or `If-None-Match` header: a list of entity tags, or `*`. Versions are strong validators, so
/// `If-Match` compares strongly (a weak tag `W/"…"` never matches, RFC 9110 §13.1.1) while `If-None-Match`
/// compares weakly (§13.1.2).
struct EntityTags: Sendable, Equatable {
    private var tags: [(value: Substring, isWeak: Bool)]
    private var isWildcard: Bool

    init(_ header: String) {
        tags = []
        isWildcard = false
        for raw in header.split(separator: ",") {
            var tag = Substring(String(raw).trimmingSpaces())
            if tag == "*" {
                isWildcard = true
                continue
            }
            let isWeak = tag.hasPrefix("W/")
            if isWeak { tag = tag.dropFirst(2) }
            tags.append((Self.unquoted(tag), isWeak))
        }
    }

    static func == (lhs: EntityTags, rhs: EntityTags) -> Bool {
        lhs.isWildcard == rhs.isWildcard && lhs.tags.elementsEqual(rhs.tags) { $0 == $1 }
    }

    /// Whether the header names `version` (or is `*` and the collection exists); nil when it does not exist.
    func matches(_ version: Version?, weakly: Bool) -> Bool {
        guard let version else { return false }
        if isWildcard { return true }
        let wanted = version.description
        return tags.contains { $0.value == wanted && (weakly || !$0.isWeak) }
    }

    /// Whether the header names the entity tag `quoted` (as an `ETag` header carries it) or is `*`, compared weakly
    /// as `If-None-Match` is: for the tags that are not a version (the feed's answers, the web client's files).
    func matchesWeakly(_ quoted: String) -> Bool {
        if isWildcard { return true }
        let wanted = Self.unquoted(Substring(quoted))
        return tags.contains { $0.value == wanted }
    }

    /// Whether `header`, an `If-Match` or `If-None-Match` of a write, is `*` or a list of versions as the `ETag`
    /// names them: `"E.3"`, `W/"E.3"`, or `E.3` without its quotes (the README's form); empty elements of the list
    /// are allowed, as in every list header, but not a list of none. Anything else can never match a version, so
    /// it is a client's mistake, refused at once: read as a list, `If-None-Match: "*"` (a tag, not the wildcard),
    /// `*;q=1`, `W/*` or a value cut at a NUL matched nothing, and the write it was to stop went through.
    ///
    /// Checked when a request arrives only, never when a record is applied: the journal's records were taken with
    /// their conditions as they are, and replay applies them as then.
    ///
    /// - Complexity: O(n) in the header's length.
    static func namesVersions(_ header: String) -> Bool {
        var rest = Substring(header).utf8
        var elements = 0
        while true {
            rest = rest.drop { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            guard let first = rest.first else { return elements > 0 }
            if first == UInt8(ascii: "*") {
                rest = rest.dropFirst()
            } else {
                if rest.starts(with: "W/".utf8) { rest = rest.dropFirst(2) }
                let isQuoted = rest.first == UInt8(ascii: "\"")
                if isQuoted { rest = rest.dropFirst() }
                // The tag runs to its closing quote or the list's next separator; `Version` judges its text.
                let end =
                    rest.firstIndex {
                        $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: " ")
                            || $0 == UInt8(ascii: "\t")
                    } ?? rest.endIndex
                guard Version.hasForm(Substring(rest[..<end])) else { return false }
                rest = rest[end...]
                if isQuoted {
                    guard rest.first == UInt8(ascii: "\"") else { return false }
                    rest = rest.dropFirst()
                }
            }
            elements += 1
            rest = rest.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            guard rest.isEmpty || rest.first == UInt8(ascii: ",") else { return false }
        }
    }

    private static func unquoted(_ tag: Substring) -> Substring {
        tag.count >= 2 && tag.hasPrefix("\"") && tag.hasSuffix("\"") ? tag.dropFirst().dropLast() : tag
    }

    /// The header with its weak tags left out, for strong comparison; nil when nothing is left.
    var strongOnly: String? {
        if isWildcard { return "*" }
        let strong = tags.filter { !$0.isWeak }.map { "\"\($0.value)\"" }
        return strong.isEmpty ? nil : strong.joined(separator: ", ")
    }

    /// The quoted entity tag of a version, as the `ETag` header carries it: `"<epoch>.<seq>"`, written in one
    /// piece (every write's answer carries one; interpolation built the version's text first, then the tag).
    static func quoted(_ version: Version) -> String {
        var epoch = version.epoch
        return epoch.withUTF8 { epoch in
            // Quotes, the dot, and at most 20 digits.
            String(unsafeUninitializedCapacity: epoch.count + 23) { buffer in
                guard let start = buffer.baseAddress else { return 0 }
                start.initialize(to: UInt8(ascii: "\""))
                if let source = epoch.baseAddress { (start + 1).initialize(from: source, count: epoch.count) }
                (start + 1 + epoch.count).initialize(to: UInt8(ascii: "."))
                let end = (start + 2 + epoch.count).writtenDecimal(UInt(version.seq))
                end.initialize(to: UInt8(ascii: "\""))
                return end + 1 - start
            }
        }
    }
}

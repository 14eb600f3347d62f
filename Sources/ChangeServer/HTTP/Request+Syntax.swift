/// What RFC 9112 says a request target and a `Host` value may hold, which libmicrohttpd 0.9.75 does not check.
extension Request {
    /// Whether the target holds a space, a control character or DEL, which it may hold only percent-encoded (RFC
    /// 9112 §3.2, RFC 3986). libmicrohttpd takes the target as all that lies between the method and the last space
    /// before the version: `PUT /items/a b HTTP/1.1` wrote item `a b`, and a bare CR in the request line made the
    /// lines after it part of the target, where a front that ends a line at a bare CR would have read two requests.
    /// A space in the query is taken: libmicrohttpd reads a `+` there as one before anything can see it.
    var hasMalformedTarget: Bool {
        path.utf8.contains { Self.isMalformedInTarget($0, inQuery: false) }
            || query.contains { argument in
                argument.name.utf8.contains { Self.isMalformedInTarget($0, inQuery: true) }
                    || argument.value.utf8.contains { Self.isMalformedInTarget($0, inQuery: true) }
            }
    }

    /// Whether a byte of a target, as libmicrohttpd hands it over, makes it malformed: a control character, DEL, a
    /// `#` (a fragment is the client's: a target never holds one), and in the path a space (in the query
    /// libmicrohttpd has made each `+` one).
    static func isMalformedInTarget(_ byte: UInt8, inQuery: Bool) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "#") || (!inQuery && byte == UInt8(ascii: " "))
    }

    /// Whether `value` is a `Host` a server must take (RFC 9112 §3.2, RFC 3986 §3.2.2): a registered name (letters,
    /// digits, `-._~`, `!$&'()*+,;=`, percent-escapes) or an IP literal in brackets, then `:` and a port of digits
    /// if any; empty, as a request without an authority sends it. libmicrohttpd trims the spaces around it.
    static func isValidHost(_ value: String) -> Bool {
        var bytes = value.utf8[...]
        if bytes.first == UInt8(ascii: "[") {
            // An IPv6 address or IPvFuture; a zone (`[fe80::1%25en0]`, RFC 6874) as clients still send it.
            guard let end = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = bytes[bytes.index(after: bytes.startIndex)..<end]
            guard !literal.isEmpty, isHostText(literal, colons: true) else { return false }
            bytes = bytes[bytes.index(after: end)...]
        } else {
            let name = bytes.prefix { $0 != UInt8(ascii: ":") }
            guard isHostText(name, colons: false) else { return false }
            bytes = bytes[name.endIndex...]
        }
        guard let colon = bytes.first else { return true }
        return colon == UInt8(ascii: ":") && bytes.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// Unreserved characters, sub-delimiters and percent-escapes, and colons if `colons`.
    private static func isHostText(_ name: Substring.UTF8View.SubSequence, colons: Bool) -> Bool {
        var index = name.startIndex
        while index < name.endIndex {
            let byte = name[index]
            if byte == UInt8(ascii: "%") {
                let digits = name[name.index(after: index)...].prefix(2)
                guard digits.count == 2, digits.allSatisfy(isHexDigit) else { return false }
                index = digits.endIndex
                continue
            }
            guard isUnreserved(byte) || isSubDelimiter(byte) || (colons && byte == UInt8(ascii: ":")) else {
                return false
            }
            index = name.index(after: index)
        }
        return true
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    private static func isSubDelimiter(_ byte: UInt8) -> Bool {
        "!$&'()*+,;=".utf8.contains(byte)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x46, 0x61...0x66: true
        default: false
        }
    }
}

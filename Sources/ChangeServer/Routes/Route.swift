import Glibc

/// The resources of API.md, matched from a request path.
enum Route: Equatable {
    case health
    case metrics
    case collections
    case collection(String)
    case mutations(String)
    case changes(String)
    case item(collection: String, id: String)
    case views
    case view(String)
    case viewChanges(String)
    /// `/v1/views/{name}/mutations` and `/v1/views/{name}/items/{id}`: views are written only through their source.
    case viewWrite(String, template: String)
    /// A file of the web client or the demo page (`StaticRoutes.swift`), by its path.
    case asset(String)

    /// The path template, as requests are counted in `/metrics`.
    var template: String {
        switch self {
        case .health: "/healthz"
        case .metrics: "/metrics"
        case .collections: "/v1/collections"
        case .collection: "/v1/collections/{name}"
        case .mutations: "/v1/collections/{name}/mutations"
        case .changes: "/v1/collections/{name}/changes"
        case .item: "/v1/collections/{name}/items/{id}"
        case .views: "/v1/views"
        case .view: "/v1/views/{name}"
        case .viewChanges: "/v1/views/{name}/changes"
        case .viewWrite(_, let template): template
        case .asset(let path): path
        }
    }

    /// The methods the route answers (besides OPTIONS), for `405` and its `Allow` header.
    var methods: [String] {
        switch self {
        case .health, .metrics, .collections, .changes, .asset, .views, .viewChanges: ["GET", "HEAD"]
        case .collection, .item, .view: ["GET", "HEAD", "PUT", "DELETE"]
        case .mutations: ["POST"]
        case .viewWrite: []
        }
    }

    /// Matches a raw (percent-encoded) path. Nil for a path that names no resource; a `400` for a malformed
    /// segment or an invalid collection name.
    static func match(_ path: String) throws(HTTPError) -> Route? {
        var path = path
        // Native strings already are; the byte loops below then run on a buffer, not through String's views.
        path.makeContiguousUTF8()
        guard let split = path.utf8.withContiguousStorageIfAvailable({ bytes in (isAPI(bytes), segments(of: bytes)) })
        else { return nil }
        // Collections and views are never the web client's files: those are looked up only for other paths.
        if !split.0 {
            let assetPath = path.utf8.count > 1 && path.utf8.last == UInt8(ascii: "/") ? String(path.dropLast()) : path
            if App.assetPaths[assetPath] != nil { return .asset(assetPath) }
        }
        guard let segments = split.1 else { throw .malformedPath }
        switch segments.count {
        case 1 where segments[0] == "healthz": return .health
        case 1 where segments[0] == "metrics": return .metrics
        case 2 where segments == ["v1", "collections"]: return .collections
        case 2 where segments == ["v1", "views"]: return .views
        default: break
        }
        if segments.count >= 3, segments[0] == "v1", segments[1] == "views" { return try matchView(segments) }
        guard segments.count >= 3, segments[0] == "v1", segments[1] == "collections" else { return nil }
        let name = segments[2]
        let route: Route
        switch segments.count {
        case 3: route = .collection(name)
        case 4 where segments[3] == "mutations": route = .mutations(name)
        case 4 where segments[3] == "changes": route = .changes(name)
        case 5 where segments[3] == "items": route = .item(collection: name, id: segments[4])
        default: return nil
        }
        guard isValidCollectionName(name) else { throw .invalidName }
        return route
    }

    /// Whether the path is under `/v1/collections` or `/v1/views`.
    private static func isAPI(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func starts(with prefix: StaticString) -> Bool {
            guard let base = bytes.baseAddress, bytes.count >= prefix.utf8CodeUnitCount else { return false }
            return memcmp(base, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0
        }
        return starts(with: "/v1/collections") || starts(with: "/v1/views")
    }

    /// The path's segments between slashes, percent-decoded: the part before the first slash and one empty
    /// segment at the end (a trailing slash) are dropped. Nil when a segment's escapes are malformed.
    private static func segments(of bytes: UnsafeBufferPointer<UInt8>) -> [String]? {
        var segments: [String] = []
        segments.reserveCapacity(6)
        var start: Int?
        for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "/") {
            defer { start = index + 1 }
            guard let start else { continue }
            let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
            let text = String(decoding: raw, as: UTF8.self)
            if raw.contains(UInt8(ascii: "%")) {
                guard let decoded = percentDecoded(Substring(text)) else { return nil }
                segments.append(decoded)
            } else {
                segments.append(text)
            }
        }
        if segments.count > 1 && segments.last?.isEmpty == true { segments.removeLast() }
        return segments
    }

    private static func matchView(_ segments: [String]) throws(HTTPError) -> Route? {
        let name = segments[2]
        let route: Route
        switch segments.count {
        case 3: route = .view(name)
        case 4 where segments[3] == "changes": route = .viewChanges(name)
        case 4 where segments[3] == "mutations": route = .viewWrite(name, template: "/v1/views/{name}/mutations")
        case 5 where segments[3] == "items": route = .viewWrite(name, template: "/v1/views/{name}/items/{id}")
        default: return nil
        }
        guard isValidCollectionName(name) else { throw .invalidName }
        return route
    }

    /// Whether a raw path is the change feed's, decided from the path alone so that even a request refused
    /// before routing (a malformed name) gets the feed's `Cache-Control: no-store`.
    static func isFeedPath(_ path: String) -> Bool {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return segments.count == 4 && segments[0] == "v1" && (segments[1] == "collections" || segments[1] == "views")
            && segments[3] == "changes"
    }

    /// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`
    static func isValidCollectionName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...128).contains(bytes.count) else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        return isAlphanumeric(bytes[0])
            && bytes.dropFirst().allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            }
    }
}

/// Decodes `%XX` escapes; nil for a malformed escape or bytes that are not UTF-8.
func percentDecoded(_ text: Substring) -> String? {
    guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(text.utf8.count)
    var iterator = text.utf8.makeIterator()
    while let byte = iterator.next() {
        guard byte == UInt8(ascii: "%") else {
            bytes.append(byte)
            continue
        }
        guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
            return nil
        }
        bytes.append(high << 4 | low)
    }
    return String(validating: bytes, as: UTF8.self)
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

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
    /// `/v1/views/{name}/items/{id}`: read only, as the view is.
    case viewItem(view: String, id: String)
    /// `/v1/views/{name}/mutations`: views are written only through their source.
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
        case .viewItem: "/v1/views/{name}/items/{id}"
        case .viewWrite(_, let template): template
        case .asset(let path): path
        }
    }

    /// The methods the route answers (besides OPTIONS), for `405` and its `Allow` header.
    var methods: [String] {
        switch self {
        case .health, .metrics, .collections, .changes, .asset, .views, .viewChanges, .viewItem: ["GET", "HEAD"]
        case .collection, .item, .view: ["GET", "HEAD", "PUT", "DELETE"]
        case .mutations: ["POST"]
        case .viewWrite: []
        }
    }

    /// Every method some route takes.
    static let allMethods = ["GET", "HEAD", "PUT", "POST", "DELETE"]

    /// Matches a raw (percent-encoded) path. Nil for a path that names no resource; a `400` for a malformed
    /// segment or an invalid collection name.
    static func match(_ path: String) throws(HTTPError) -> Route? {
        var path = path
        // Native strings already are; the byte loops below then run on a buffer, not through String's views.
        path.makeContiguousUTF8()
        let matched = path.utf8.withContiguousStorageIfAvailable { bytes -> Result<Route?, HTTPError> in
            // Collections and views are never the web client's files: those are looked up only for other paths.
            if !isAPI(bytes), let asset = assetRoute(path) { return .success(asset) }
            guard let segments = Segments(bytes) else { return .failure(.malformedPath) }
            do throws(HTTPError) {
                return .success(try match(segments))
            } catch {
                return .failure(error)
            }
        }
        guard let matched else { return nil }
        return try matched.get()
    }

    private static func assetRoute(_ path: String) -> Route? {
        let assetPath = path.utf8.count > 1 && path.utf8.last == UInt8(ascii: "/") ? String(path.dropLast()) : path
        return App.assetPaths[assetPath] != nil ? .asset(assetPath) : nil
    }

    private static func match(_ segments: Segments) throws(HTTPError) -> Route? {
        switch segments.count {
        case 1 where segments[0, is: "healthz"]: return .health
        case 1 where segments[0, is: "metrics"]: return .metrics
        case 2 where segments[0, is: "v1"] && segments[1, is: "collections"]: return .collections
        case 2 where segments[0, is: "v1"] && segments[1, is: "views"]: return .views
        default: break
        }
        guard (3...5).contains(segments.count), segments[0, is: "v1"] else { return nil }
        if segments[1, is: "views"] { return try matchView(segments) }
        guard segments[1, is: "collections"] else { return nil }
        let isMutations = segments.count == 4 && segments[3, is: "mutations"]
        switch segments.count {
        case 3: break
        case 4 where isMutations || segments[3, is: "changes"]: break
        case 5 where segments[3, is: "items"]: break
        default: return nil
        }
        guard segments.isValidName(2) else { throw .invalidName(.collection) }
        let name = segments.text(2)
        switch segments.count {
        case 3: return .collection(name)
        case 4: return isMutations ? .mutations(name) : .changes(name)
        default: return .item(collection: name, id: segments.text(4))
        }
    }

    private static func matchView(_ segments: Segments) throws(HTTPError) -> Route? {
        let writeTemplate: String?
        switch segments.count {
        case 3: writeTemplate = nil
        case 4 where segments[3, is: "changes"]: writeTemplate = nil
        case 4 where segments[3, is: "mutations"]: writeTemplate = "/v1/views/{name}/mutations"
        case 5 where segments[3, is: "items"]: writeTemplate = nil
        default: return nil
        }
        guard segments.isValidName(2) else { throw .invalidName(.view) }
        let name = segments.text(2)
        if let writeTemplate { return .viewWrite(name, template: writeTemplate) }
        if segments.count == 5 { return .viewItem(view: name, id: segments.text(4)) }
        return segments.count == 3 ? .view(name) : .viewChanges(name)
    }

    /// Whether the path is under `/v1/collections` or `/v1/views`.
    private static func isAPI(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func starts(with prefix: StaticString) -> Bool {
            guard let base = bytes.baseAddress, bytes.count >= prefix.utf8CodeUnitCount else { return false }
            return memcmp(base, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0
        }
        return starts(with: "/v1/collections") || starts(with: "/v1/views")
    }

    /// A path's segments between slashes, percent-decoded: the part before the first slash and one empty segment
    /// at the end (a trailing slash) are dropped. Segments stay bytes of the path until a route asks for one as
    /// text, and the first `inline.count` are kept without allocating (no route has more), so that matching a
    /// request allocates only the names it keeps.
    private struct Segments {
        private let bytes: UnsafeBufferPointer<UInt8>
        private var inline = InlineArray<6, Range<Int>>(repeating: 0..<0)
        /// The decoded text of segments that had escapes, by index; empty for most paths, so it is looked in only
        /// when it is not (`decodedText`): a lookup hashes its key even in an empty dictionary.
        private var decoded: [Int: String] = [:]
        /// Segments in the path; those past `inline.count` are checked but not kept.
        private(set) var count = 0

        /// Nil when a segment's escapes are malformed.
        init?(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            var start: Int?
            var lastIsEmpty = false
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                defer { start = index + 1 }
                guard let start else { continue }
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                if raw.contains(UInt8(ascii: "%")) {
                    guard let text = percentDecoded(Substring(String(decoding: raw, as: UTF8.self))) else { return nil }
                    decoded[count] = text
                }
                if count < inline.count { inline[count] = start..<index }
                lastIsEmpty = raw.isEmpty
                count += 1
            }
            if count > 1, lastIsEmpty { count -= 1 }
        }

        /// Whether segment `index` is `literal`.
        subscript(index: Int, is literal: StaticString) -> Bool {
            let literalBytes = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
            if let text = decodedText(index) { return text.utf8.elementsEqual(literalBytes) }
            let range = inline[index]
            guard let base = bytes.baseAddress, range.count == literalBytes.count else { return false }
            return memcmp(base + range.lowerBound, literal.utf8Start, range.count) == 0
        }

        private func decodedText(_ index: Int) -> String? {
            decoded.isEmpty ? nil : decoded[index]
        }

        /// Segment `index` as text.
        func text(_ index: Int) -> String {
            if let text = decodedText(index) { return text }
            let range = inline[index]
            return String(unsafeUninitializedCapacity: range.count) { text in
                _ = text.initialize(from: UnsafeBufferPointer(rebasing: bytes[range]))
                return range.count
            }
        }

        /// Whether segment `index` is a valid collection or view name (`Route.isValidCollectionName`).
        func isValidName(_ index: Int) -> Bool {
            if let text = decodedText(index) { return isValidCollectionName(text) }
            return Route.isValidName(UnsafeBufferPointer(rebasing: bytes[inline[index]]))
        }
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
        var name = name
        return name.withUTF8 { isValidName($0) }
    }

    /// `isValidCollectionName` of a name's bytes.
    static func isValidName(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, bytes.count <= 128 else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        return isAlphanumeric(first)
            && bytes.dropFirst().allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            }
    }
}

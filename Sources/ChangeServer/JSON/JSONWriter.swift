/// Writes JSON text into bytes. The server encodes every response with it, so that one changeset is turned into
/// bytes once, without building a tree of values first.
///
/// The text is written into memory of its own, grown by doubling, and copied out once by `bytes`: appending to an
/// array byte by byte checked its uniqueness and capacity at every byte, and a small changeset cost about 50
/// instructions per byte written. Not copyable, so that the memory has exactly one owner.
struct JSONWriter: ~Copyable {
    private var start: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    /// Whether the object being written has a member already (so that the next one needs a comma).
    private var objectHasMembers = false

    init(capacity: Int = 256) {
        self.capacity = max(capacity, 16)
        start = .allocate(capacity: self.capacity)
    }

    deinit {
        start.deallocate()
    }

    /// What was written so far.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: start, count: count)) }

    @inline(__always)
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { raw($0) }
    }

    mutating func raw(_ other: [UInt8]) {
        other.withUnsafeBufferPointer { raw($0) }
    }

    @inline(__always)
    mutating func raw(_ other: UnsafeBufferPointer<UInt8>) {
        guard let source = other.baseAddress else { return }
        reserve(other.count)
        (start + count).initialize(from: source, count: other.count)
        count += other.count
    }

    mutating func integer(_ value: Int) {
        if value < 0 { byte(UInt8(ascii: "-")) }
        digits(value.magnitude)
    }

    /// The decimal digits of `value`, unquoted.
    mutating func digits(_ value: UInt) {
        reserve(20)
        count = (start + count).writtenDecimal(value) - start
    }

    /// A JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8. Runs that need
    /// no escape (usually the whole string) are copied as they are.
    mutating func string(_ text: String) {
        var text = text
        text.withUTF8 { string(utf8: $0) }
    }

    /// `string` for text given as UTF-8 bytes.
    mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        byte(UInt8(ascii: "\""))
        escaped(utf8: utf8)
        byte(UInt8(ascii: "\""))
    }

    /// The inside of a JSON string, without its quotes.
    mutating func escaped(utf8: UnsafeBufferPointer<UInt8>) {
        var run = 0
        for index in utf8.indices where Self.needsEscape(utf8[index]) {
            raw(UnsafeBufferPointer(rebasing: utf8[run..<index]))
            escape(utf8[index])
            run = index + 1
        }
        raw(UnsafeBufferPointer(rebasing: utf8[run...]))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): raw("\\\"")
        case UInt8(ascii: "\\"): raw("\\\\")
        case 0x0A: raw("\\n")
        case 0x0D: raw("\\r")
        case 0x09: raw("\\t")
        case 0x08: raw("\\b")
        case 0x0C: raw("\\f")
        default:
            raw("\\u00")
            self.byte(Self.hexDigits[Int(byte >> 4)])
            self.byte(Self.hexDigits[Int(byte & 0xF)])
        }
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        start[count] = value
        count += 1
    }

    /// Makes room for `more` bytes after `count`.
    @inline(__always)
    private mutating func reserve(_ more: Int) {
        if capacity - count < more { grow(more) }
    }

    @inline(never)
    private mutating func grow(_ more: Int) {
        var grown = capacity * 2
        while grown - count < more { grown *= 2 }
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.initialize(from: start, count: count)
        start.deallocate()
        start = moved
        capacity = grown
    }

    /// `{...}`: `members` writes the members with the `field` methods, which place the commas.
    mutating func object(_ members: (inout JSONWriter) -> Void) {
        let outer = objectHasMembers
        objectHasMembers = false
        byte(UInt8(ascii: "{"))
        members(&self)
        byte(UInt8(ascii: "}"))
        objectHasMembers = outer
    }

    /// `"key":` and then what `value` writes.
    mutating func field(_ key: StaticString, _ value: (inout JSONWriter) -> Void) {
        if objectHasMembers { byte(UInt8(ascii: ",")) }
        objectHasMembers = true
        byte(UInt8(ascii: "\""))
        raw(key)
        raw("\":")
        value(&self)
    }

    mutating func field(_ key: StaticString, _ value: String) { field(key) { $0.string(value) } }
    mutating func field(_ key: StaticString, _ value: Int) { field(key) { $0.integer(value) } }
    /// A member whose value is JSON text already (canonical `data`).
    mutating func field(_ key: StaticString, json value: [UInt8]) { field(key) { $0.raw(value) } }

    /// Writes `[element, element, ...]`.
    mutating func array<Element>(_ elements: some Sequence<Element>, _ write: (inout JSONWriter, Element) -> Void) {
        byte(UInt8(ascii: "["))
        var first = true
        for element in elements {
            if !first { byte(UInt8(ascii: ",")) }
            first = false
            write(&self, element)
        }
        byte(UInt8(ascii: "]"))
    }

    /// Writes a value in canonical form: object keys sorted by their UTF-8 bytes, no whitespace, numbers as parsed
    /// (an integer stays an integer; a real is printed in the shortest form that reads back the same, with a
    /// fraction or exponent, so `1.0` stays distinct from `1`).
    mutating func canonical(_ value: JSONValue) {
        switch value.kind {
        case .null: raw("null")
        case .bool: value.isTrue ? raw("true") : raw("false")
        case .integer: integer(value.integer ?? 0)
        case .real:
            var text = value.real.description
            text.withUTF8 { raw($0) }
        case .string:
            // A string without escapes reads back as its own text, which the parser checked holds no control
            // character: copied as it stands.
            guard let text = value.unescapedText else { return string(value.string ?? "") }
            byte(UInt8(ascii: "\""))
            text.withUnsafeBufferPointer { raw($0) }
            byte(UInt8(ascii: "\""))
        case .array:
            byte(UInt8(ascii: "["))
            var first = true
            value.forEachElement { element in
                if !first { byte(UInt8(ascii: ",")) }
                first = false
                canonical(element)
            }
            byte(UInt8(ascii: "]"))
        case .object:
            var members = value.memberBytes
            if members.count > 1 { members.sort { $0.key.lexicographicallyPrecedes($1.key) } }
            byte(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { byte(UInt8(ascii: ",")) }
                member.key.withUnsafeBufferPointer { string(utf8: $0) }
                byte(UInt8(ascii: ":"))
                canonical(member.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

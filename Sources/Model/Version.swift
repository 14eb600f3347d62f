/// A collection's version, `"<epoch>.<seq>"`: the epoch is chosen at random when the collection is created,
/// the sequence number counts committed mutations (0 is the empty collection before creation, 1 the created one).
public struct Version: Hashable, Sendable {
    /// Chosen at random when the collection is created: `[A-Za-z0-9_-]{1,32}`.
    public var epoch: String
    /// One for the created collection, growing by one per committed mutation.
    public var seq: UInt64

    /// - Precondition: `epoch` is a valid epoch (see `Version.isValidEpoch`).
    public init(epoch: String, seq: UInt64) {
        precondition(Version.isValidEpoch(epoch), "invalid epoch \(epoch)")
        self.epoch = epoch
        self.seq = seq
    }

    /// Parses `"<epoch>.<seq>"` as `description` writes it; nil when the text is not of that form (`seq` in
    /// decimal digits without a leading zero) or `seq` does not fit in 64 bits. One spelling per version, as an
    /// `ETag` has: `E.055` would otherwise be read as `E.55` where `If-Match: "E.055"` does not match `"E.55"`.
    public init?(_ text: some StringProtocol) {
        guard Version.hasForm(text), let dot = text.lastIndex(of: "."),
            let seq = UInt64(text[text.index(after: dot)...])
        else { return nil }
        self.epoch = String(text[..<dot])
        self.seq = seq
    }

    /// Whether `text` is `"<epoch>.<seq>"` as `description` writes it, whether or not `seq` fits in 64 bits.
    public static func hasForm(_ text: some StringProtocol) -> Bool {
        guard let dot = text.lastIndex(of: ".") else { return false }
        let digits = text[text.index(after: dot)...].utf8
        return isValidEpoch(String(text[..<dot])) && !digits.isEmpty && digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            && (digits.count == 1 || digits.first != 0x30)
    }

    /// `[A-Za-z0-9_-]{1,32}`.
    public static func isValidEpoch(_ epoch: String) -> Bool {
        let bytes = epoch.utf8
        return (1...longestEpoch).contains(bytes.count) && bytes.allSatisfy(isEpochByte)
    }

    /// The most bytes an epoch has.
    public static let longestEpoch = 32

    private static func isEpochByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// A random epoch of 12 characters from the epoch alphabet.
    package static func randomEpoch(using generator: inout some RandomNumberGenerator) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<12).map { _ in alphabet.randomElement(using: &generator)! })
    }

    /// The version after this one in the same epoch.
    public var next: Version {
        var next = self
        next.seq += 1
        return next
    }
}

extension Version: CustomStringConvertible {
    /// `<epoch>.<seq>`, as on the wire.
    public var description: String { "\(epoch).\(seq)" }
}

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

    /// Parses `"<epoch>.<seq>"`; nil when the text is not of that form or `seq` does not fit in 64 bits.
    public init?(_ text: some StringProtocol) {
        guard let dot = text.lastIndex(of: ".") else { return nil }
        let epoch = String(text[..<dot])
        let digits = text[text.index(after: dot)...]
        guard Version.isValidEpoch(epoch), !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let seq = UInt64(digits)
        else { return nil }
        self.epoch = epoch
        self.seq = seq
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

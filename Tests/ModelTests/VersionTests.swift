import Testing

@testable import Model

@Suite struct VersionTests {
    @Test(arguments: ["k3f9.42", "a.0", "A_b-9.18446744073709551615", String(repeating: "z", count: 32) + ".7"])
    func parsesAndPrintsBack(_ text: String) throws {
        let version = try #require(Version(text))
        #expect(version.description == text)
    }

    @Test(arguments: [
        "", ".", "k3f9", "k3f9.", ".42", "k3f9.-1", "k3f9.+1", "k3f9.4a", "k3 f9.1", "é.1", "k3f9.18446744073709551616",
        String(repeating: "z", count: 33) + ".7", "k3f9.042", "k3f9.00", "k3f9.0001",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(Version(text) == nil)
    }

    @Test func randomEpochIsValidAndVaries() {
        var generator = SystemRandomNumberGenerator()
        let epochs = Set((0..<100).map { _ in Version.randomEpoch(using: &generator) })
        #expect(epochs.count == 100)
        #expect(epochs.allSatisfy(Version.isValidEpoch))
    }
}

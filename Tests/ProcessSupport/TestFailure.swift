/// A failure of the tests' own machinery (a server that did not start, an answer of the wrong shape).
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

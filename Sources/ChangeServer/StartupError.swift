/// A reason the server cannot start; `main` prints it and exits with status 1.
struct StartupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

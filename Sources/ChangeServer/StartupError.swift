/// A reason the server cannot start; `main` prints it and exits with status 1.
struct StartupError: Error, CustomStringConvertible {
    var description: String
    /// Whether trying again may get past it: the database's connection broke (a restart or failover of the database
    /// while the server starts), which the start tries again within its patience.
    var mayPass = false

    init(_ description: String, mayPass: Bool = false) {
        self.description = description
        self.mayPass = mayPass
    }
}

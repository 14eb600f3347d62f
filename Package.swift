// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ChangeServer",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "Model", targets: ["Model"]),
        .library(name: "ChangeFeedClient", targets: ["ChangeFeedClient"]),
        .executable(name: "ChangeServer", targets: ["ChangeServer"]),
        .executable(name: "Bench", targets: ["Bench"]),
        .executable(name: "Load", targets: ["Load"]),
        .executable(name: "BareHTTPD", targets: ["BareHTTPD"]),
    ],
    targets: [
        .systemLibrary(name: "CHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "Model"),
        .target(name: "ChangeFeedClient", dependencies: ["Model"]),
        .executableTarget(name: "ChangeServer", dependencies: ["Model", "CHTTPD", "CPostgres"]),
        .executableTarget(name: "Bench", dependencies: ["Model"]),
        .executableTarget(name: "Load"),
        .executableTarget(name: "BareHTTPD", linkerSettings: [.linkedLibrary("microhttpd")]),
        .executableTarget(name: "ClientBench", dependencies: ["ChangeFeedClient", "Model"]),
        .executableTarget(
            name: "FeedFollower", dependencies: ["ChangeFeedClient", "Model"], path: "Examples/FeedFollower"),
        // The tests' independent checks of changesets (UIKit's batch rules, minimal moves), shared by the test targets.
        .target(name: "ChangesetChecks", dependencies: ["Model"], path: "Tests/ChangesetChecks"),
        // Real processes for the tests: the built server on a free port, programs run with all they start, and
        // bounded waits; shared by the test targets that start them.
        .target(name: "ProcessSupport", path: "Tests/ProcessSupport"),
        .testTarget(name: "ModelTests", dependencies: ["Model", "ChangesetChecks"]),
        .testTarget(name: "ChangeServerTests", dependencies: ["ChangeServer", "Model", "ProcessSupport"]),
        .testTarget(
            name: "ChangeFeedClientTests",
            dependencies: [
                "ChangeFeedClient", "Model", "ChangeServer", "FeedFollower", "ChangesetChecks", "ProcessSupport",
            ]),
    ]
)

// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ChangeServer",
    products: [
        .library(name: "Model", targets: ["Model"]),
        .executable(name: "ChangeServer", targets: ["ChangeServer"]),
        .executable(name: "Bench", targets: ["Bench"]),
        .executable(name: "Load", targets: ["Load"]),
        .executable(name: "BareHTTPD", targets: ["BareHTTPD"]),
    ],
    targets: [
        .systemLibrary(name: "CHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "Model"),
        .executableTarget(name: "ChangeServer", dependencies: ["Model", "CHTTPD", "CPostgres"]),
        .executableTarget(name: "Bench", dependencies: ["Model"]),
        .executableTarget(name: "Load"),
        .executableTarget(name: "BareHTTPD", linkerSettings: [.linkedLibrary("microhttpd")]),
        .testTarget(name: "ModelTests", dependencies: ["Model"]),
        .testTarget(name: "ChangeServerTests", dependencies: ["ChangeServer", "Model"]),
    ]
)

// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ChangeServer",
    products: [
        .library(name: "Model", targets: ["Model"]),
        .executable(name: "ChangeServer", targets: ["ChangeServer"]),
        .executable(name: "Bench", targets: ["Bench"]),
        .executable(name: "FanoutLoad", targets: ["FanoutLoad"]),
    ],
    targets: [
        .systemLibrary(name: "CHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CJansson", pkgConfig: "jansson", providers: [.apt(["libjansson-dev"])]),
        .target(name: "Model"),
        .executableTarget(name: "ChangeServer", dependencies: ["Model", "CHTTPD", "CJansson"]),
        .executableTarget(name: "Bench", dependencies: ["Model"]),
        .executableTarget(name: "FanoutLoad"),
        .testTarget(name: "ModelTests", dependencies: ["Model"]),
        .testTarget(name: "ChangeServerTests", dependencies: ["ChangeServer", "Model"]),
    ]
)

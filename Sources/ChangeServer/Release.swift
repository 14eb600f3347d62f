/// Which release this build is: `--version` prints it, the start's log line and `changeserver_build_info` carry
/// it. It is the `info.version` of `openapi.yaml`, the contract this build serves, and moves with it (a test holds
/// the two equal).
enum Release {
    static let version = "1.1.0"
}

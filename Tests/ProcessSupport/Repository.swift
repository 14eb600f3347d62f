import Foundation

/// The checkout the tests run in: the scripts, web client, browser tests and `openapi.yaml` they use live there.
public enum Repository {
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}

import Foundation

/// The Python that runs the contract and browser tests: the virtual environment that `scripts/install-deps.sh` makes
/// in the repository (`.venv`, holding the tools of `scripts/requirements-test.txt`), or `python3` on `PATH` when
/// there is none (the tools installed another way). Debian 12's own Python refuses `pip install` outside a virtual
/// environment (PEP 668).
public enum TestPython {
    public static let executable: String = {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let environment = repository.appendingPathComponent(".venv/bin/python3").path
        return FileManager.default.isExecutableFile(atPath: environment) ? environment : "python3"
    }()
}

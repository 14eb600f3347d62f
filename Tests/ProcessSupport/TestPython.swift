import Foundation

/// The Python that runs the contract and browser tests: the virtual environment that `scripts/install-deps.sh` makes
/// in the repository (`.venv`, holding the tools of `scripts/requirements-test.txt`), or `python3` on `PATH` when
/// there is no `.venv` (the tools installed another way). Debian 12's own Python refuses `pip install` outside a
/// virtual environment (PEP 668). A `.venv` whose Python is broken is still used, so that the tests say so.
public enum TestPython {
    public static let executable: String = {
        let environment = Repository.root.appendingPathComponent(".venv")
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: environment.path, isDirectory: &isFolder), isFolder.boolValue
        else { return "python3" }
        return environment.appendingPathComponent("bin/python3").path
    }()
}

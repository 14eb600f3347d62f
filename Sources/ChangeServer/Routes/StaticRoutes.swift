/// `GET /`, `GET /demo` and its assets, `GET /v1/client/changefeed.js`: the web client and the live demo, served
/// from the files compiled in by `scripts/embed-web.sh`. Open to everyone (no token): they hold no data.
extension App {
    /// The embedded file (a key of `EmbeddedWeb.files`) served at each path.
    static let assetPaths: [String: String] = {
        var paths = ["/": "demo/index.html", "/demo": "demo/index.html", "/v1/client/changefeed.js": "changefeed.js"]
        for file in EmbeddedWeb.files.keys where file.hasPrefix("demo/") && file != "demo/index.html" {
            paths["/\(file)"] = file
        }
        return paths
    }()

    /// The file itself, or `304` when `If-None-Match` names its ETag. `no-cache`: browsers revalidate every time,
    /// so a new server version is picked up at once.
    func asset(_ request: Request, _ path: String) -> Response {
        guard let name = Self.assetPaths[path], let file = EmbeddedWeb.files[name] else {
            return .error(.routeNotFound(path))
        }
        let headers = [("Content-Type", file.contentType), ("Cache-Control", "no-cache"), ("ETag", file.etag)]
        let ok = Response(.ok, headers: headers, body: Array(file.text.utf8))
        if let tags = request.listHeader("If-None-Match"), EntityTags(tags).matchesWeakly(file.etag) {
            return .notModified(answering: ok)
        }
        return ok
    }
}

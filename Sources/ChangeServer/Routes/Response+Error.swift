extension Response {
    /// The error body of API.md: `{"error": {"code", "message"}}`, with `op` and `current` where they apply.
    static func error(_ error: HTTPError) -> Response {
        json(error.status, headers: error.headers) { writer in
            writer.object { writer in
                writer.field("error") {
                    $0.object { writer in
                        writer.field("code", error.code.text)
                        writer.field("message", error.message)
                        if let opIndex = error.opIndex { writer.field("op", opIndex) }
                    }
                }
                if let current = error.current { writer.field("current", current) }
            }
        }
    }
}

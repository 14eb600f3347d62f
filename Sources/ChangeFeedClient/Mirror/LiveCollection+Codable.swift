import Model

/// The saved form: the version and the sections, each `data` as its canonical JSON text.
extension LiveCollection: Codable {
    private enum CodingKeys: String, CodingKey { case version, sections }

    private struct SavedItem: Codable {
        var id: String
        var data: String
    }

    private struct SavedSection: Codable {
        var id: String
        var data: String
        var items: [SavedItem]
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(version.map { "\($0)" }, forKey: .version)
        let saved = mirror.map { section in
            SavedSection(
                id: section.id, data: section.data.description,
                items: section.items.chunks.flatMap { $0.map { SavedItem(id: $0.id, data: $0.data.description) } })
        }
        try container.encode(saved, forKey: .sections)
    }

    /// Restores a saved mirror; its data is checked to be JSON and made canonical again, and its ids unique.
    /// - Throws: `DecodingError` for a saved form that is not one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let versionText = try container.decodeIfPresent(String.self, forKey: .version)
        let saved = try container.decode([SavedSection].self, forKey: .sections)
        func data(_ text: String) throws -> JSONData {
            do {
                return try JSON(parsing: Array(text.utf8)).data
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .sections, in: container, debugDescription: "data is not JSON: \(error.reason)")
            }
        }
        let sections = try saved.map { section in
            Section(
                id: section.id, data: try data(section.data),
                items: try section.items.map { Item(id: $0.id, data: try data($0.data)) })
        }
        guard let versionText else {
            self.init()
            return
        }
        guard let version = Version(versionText) else {
            throw DecodingError.dataCorruptedError(
                forKey: .version, in: container, debugDescription: "not a version: \(versionText)")
        }
        do {
            try self.init(Snapshot(name: "", version: version, sections: sections))
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: .sections, in: container, debugDescription: error.description)
        }
    }
}

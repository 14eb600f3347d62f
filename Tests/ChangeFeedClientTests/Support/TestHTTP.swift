import Foundation
import Model
import ProcessSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Plain requests to a live server, for the tests to change it and read its snapshots.
struct TestHTTP {
    let baseURL: URL

    /// Sends a request; the status and the body.
    @discardableResult
    func send(_ method: String, _ path: String, _ body: String? = nil) async throws -> (status: Int, body: [UInt8]) {
        var request = URLRequest(url: URL(string: baseURL.absoluteString + path)!)
        request.httpMethod = method
        request.timeoutInterval = 30
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let response = response as? HTTPURLResponse else { throw TestFailure("no HTTP response") }
        return (response.statusCode, Array(data))
    }

    /// Sends a mutation and checks its status is one of `expected`.
    func mutate(_ method: String, _ path: String, _ body: String? = nil, expect expected: Set<Int> = [200, 201, 204])
        async throws
    {
        let answer = try await send(method, path, body)
        guard expected.contains(answer.status) else {
            throw TestFailure(
                "\(method) \(path) answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        }
    }

    /// The snapshot of a collection (`/v1/collections/NAME`) or view (`/v1/views/NAME`): version and sections.
    func snapshot(_ path: String) async throws -> (version: String, sections: [Section]) {
        let answer = try await send("GET", path)
        guard answer.status == 200, case .object(let root) = try JSON(parsing: answer.body),
            case .string(let version) = root["version"], case .array(let sections) = root["sections"]
        else { throw TestFailure("GET \(path) answered \(answer.status)") }
        return (version, try sections.map(Self.section))
    }

    static func section(_ value: JSON) throws -> Section {
        guard case .object(let members) = value, case .string(let id) = members["id"],
            case .array(let items) = members["items"]
        else { throw TestFailure("not a section: \(value)") }
        return Section(id: id, data: members["data"]?.data ?? .null, items: try items.map(item))
    }

    static func item(_ value: JSON) throws -> Item {
        guard case .object(let members) = value, case .string(let id) = members["id"] else {
            throw TestFailure("not an item: \(value)")
        }
        return Item(id: id, data: members["data"]?.data ?? .null)
    }
}

/// The request body text of sections.
func bodyText(_ sections: [Section]) -> String {
    "[" + sections.map(bodyText).joined(separator: ",") + "]"
}

func bodyText(_ section: Section) -> String {
    let items = section.items.map { "{\"id\":\"\($0.id)\",\"data\":\($0.data)}" }.joined(separator: ",")
    return "{\"id\":\"\(section.id)\",\"data\":\(section.data),\"items\":[\(items)]}"
}

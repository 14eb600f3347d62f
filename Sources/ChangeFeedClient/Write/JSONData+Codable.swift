import Foundation
import Model

extension JSONData {
    /// The JSON of an `Encodable` value, for an item's or section's data: `JSONEncoder`'s output made canonical
    /// (keys sorted, no whitespace), as the server keeps it.
    /// - Throws: `EncodingError` from `encoder` (a value with no JSON form, a non-finite number say).
    public init(encoding value: some Encodable, with encoder: JSONEncoder = JSONEncoder()) throws {
        let bytes = Array(try encoder.encode(value))
        do throws(JSON.ParseError) {
            self = try JSON(parsing: bytes).data
        } catch {
            // JSONEncoder writes JSON; this would be a bug of its own.
            throw EncodingError.invalidValue(
                value, .init(codingPath: [], debugDescription: "JSONEncoder wrote text that is not JSON: \(error)"))
        }
    }

    /// The data decoded as `type`, for example an item's data as the app's own `struct`.
    /// - Throws: `DecodingError` from `decoder`.
    public func decoded<T: Decodable>(as type: T.Type, with decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(bytes))
    }
}

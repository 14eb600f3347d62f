import Foundation

@testable import Model

/// An independent, naive evaluation of a view definition on a source snapshot: parses every item's data into a
/// tree, walks pointers, filters, sorts with its own comparison and groups, all from scratch, sharing none of
/// the live view's code (only Model's JSON parser and canonical writer).
enum NaiveView {
    static func content(_ definition: ViewDefinition, source: [Section]?) -> [Section] {
        struct Row {
            var item: Item
            var section: JSON
            var sort: [JSON]
        }
        var rows: [Row] = []
        for item in (source ?? []).flatMap(\.items) {
            guard let data = try? JSON(parsing: item.data) else { continue }
            if let filter = definition.filter, !holds(filter, data) { continue }
            let section = definition.sectionBy.map { lookup($0.field.text, in: data) ?? .null } ?? .null
            if definition.sectionBy != nil, section.canonicalText.count > maximumIDByteCount { continue }
            let sort = definition.sortBy.map { lookup($0.field.text, in: data) ?? .null }
            rows.append(Row(item: item, section: section, sort: sort))
        }
        rows.sort { a, b in
            if let key = definition.sectionBy, a.section.canonicalText != b.section.canonicalText {
                return key.descending ? less(b.section, a.section) : less(a.section, b.section)
            }
            // Values equal by API.md's order (`1` and `1.0` too) tie, and the id breaks the tie.
            for (index, key) in definition.sortBy.enumerated() {
                let order = order(a.sort[index], b.sort[index])
                if order != 0 { return key.descending ? order > 0 : order < 0 }
            }
            return a.item.id.utf8.lexicographicallyPrecedes(b.item.id.utf8)
        }
        if let limit = definition.limit { rows = Array(rows.prefix(limit)) }
        guard definition.sectionBy != nil else { return [Section(id: "all", items: rows.map(\.item))] }
        var content: [Section] = []
        for row in rows {
            let id = String(decoding: row.section.canonicalText, as: UTF8.self)
            // Bytes, as the contract compares keys: `String` would merge "é" and "e" + U+0301.
            if content.last.map({ Array($0.id.utf8) }) != row.section.canonicalText {
                content.append(Section(id: id, data: JSONData(canonical: "{\"key\":\(id)}")))
            }
            content[content.count - 1].items.append(row.item)
        }
        return content
    }

    /// RFC 6901, written out again.
    static func lookup(_ pointer: String, in value: JSON) -> JSON? {
        guard !pointer.isEmpty else { return value }
        var current = value
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = raw.replacingOccurrences("~1", "/").replacingOccurrences("~0", "~")
            switch current {
            case .object(let members):
                guard let next = members[ExactString(token)] else { return nil }
                current = next
            case .array(let elements):
                guard token.allSatisfy(\.isASCII), token.allSatisfy(\.isNumber), token == "0" || !token.hasPrefix("0"),
                    let index = Int(token), index < elements.count
                else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }

    /// The order of API.md, written out again, made total on distinct values as sections need: numbers of equal
    /// value and different text (`1`, `1.0`) by their text.
    static func less(_ a: JSON, _ b: JSON) -> Bool {
        let order = order(a, b)
        return order != 0 ? order < 0 : a.canonicalText.lexicographicallyPrecedes(b.canonicalText)
    }

    /// -1, 0 or 1 by the order of API.md: numbers by value (Foundation's `Decimal`, exact for the tests' numbers),
    /// so `1` and `1.0` are 0.
    static func order(_ a: JSON, _ b: JSON) -> Int {
        func rank(_ value: JSON) -> Int {
            switch value {
            case .null: 0
            case .bool(false): 1
            case .bool(true): 2
            case .number: 3
            case .string: 4
            case .array: 5
            case .object: 6
            }
        }
        guard rank(a) == rank(b) else { return rank(a) < rank(b) ? -1 : 1 }
        func sign(_ less: Bool, _ equal: Bool) -> Int { equal ? 0 : less ? -1 : 1 }
        switch (a, b) {
        case (.number(let x), .number(let y)):
            let (u, v) = (decimal(x), decimal(y))
            return sign(u < v, u == v)
        case (.string(let x), .string(let y)):
            return sign(x.utf8.lexicographicallyPrecedes(y.utf8), x.utf8.elementsEqual(y.utf8))
        default:
            let (x, y) = (a.canonicalText, b.canonicalText)
            return sign(x.lexicographicallyPrecedes(y), x == y)
        }
    }

    private static func decimal(_ text: String) -> Decimal {
        guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else {
            preconditionFailure("the tests' number \(text) is not a Decimal")
        }
        return value
    }

    static func holds(_ filter: ViewFilter, _ data: JSON) -> Bool {
        switch filter {
        case .all(let filters): return filters.allSatisfy { holds($0, data) }
        case .any(let filters): return filters.contains { holds($0, data) }
        case .not(let filter): return !holds(filter, data)
        case .leaf(let field, let test):
            let value = lookup(field.text, in: data)
            let text = (value ?? .null).canonicalText
            switch test {
            case .eq(let operand): return text == operand.canonicalText
            case .ne(let operand): return text != operand.canonicalText
            case .in(let operands): return operands.contains { $0.canonicalText == text }
            case .exists(let wanted): return (value != nil) == wanted
            case .prefix(let prefix):
                guard case .string(let string)? = value else { return false }
                return string.utf8.starts(with: prefix.utf8)
            case .lt(let operand): return compare(value, operand).map { $0 < 0 } ?? false
            case .le(let operand): return compare(value, operand).map { $0 <= 0 } ?? false
            case .gt(let operand): return compare(value, operand).map { $0 > 0 } ?? false
            case .ge(let operand): return compare(value, operand).map { $0 >= 0 } ?? false
            }
        }
    }

    /// -1, 0 or 1 when both are numbers (by value) or both strings (bytewise); nil otherwise.
    static func compare(_ value: JSON?, _ operand: JSON) -> Int? {
        switch (value, operand) {
        case (.number?, .number):
            return order(value ?? .null, operand)
        case (.string(let x)?, .string(let y)):
            return x.utf8.elementsEqual(y.utf8) ? 0 : x.utf8.lexicographicallyPrecedes(y.utf8) ? -1 : 1
        default:
            return nil
        }
    }
}

extension Substring {
    fileprivate func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        var result = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

extension String {
    fileprivate func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        self[...].replacingOccurrences(target, replacement)
    }
}

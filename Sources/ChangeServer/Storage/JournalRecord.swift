import Model

/// A mutation as the client asked for it, with its preconditions: the journal's unit. Applying the same records
/// in the same order to the same state always gives the same result, rejections included, which is what makes
/// replay at recovery exact.
enum JournalRecord: Sendable, Equatable {
    /// `PUT /v1/collections/{name}`: replace, or create with `epoch` when the collection does not exist.
    case put(collection: String, epoch: String, sections: [Section], conditions: Conditions)
    /// `POST .../mutations` and `DELETE .../items/{id}`.
    case ops(collection: String, ops: [Op], conditions: Conditions)
    /// `PUT .../items/{id}`. `refusesMissingDefault`: the upsert names section `"default"` and was journaled before
    /// 2026-12-06 (`RecordCodec.Kind.upsert`), when such an upsert into a collection with no section was refused
    /// (`409 section_not_found`) where leaving `section` out created the section; it is replayed as it was applied,
    /// so that history does not gain an item its writer was told was refused. Upserts written since that name
    /// `"default"` are `Kind.upsertNamingDefault`, and create the section as leaving `section` out does.
    case upsert(
        collection: String, id: String, data: JSONData, section: SectionRef?, index: Int?, conditions: Conditions,
        refusesMissingDefault: Bool = false)
    /// `DELETE /v1/collections/{name}`.
    case delete(collection: String, conditions: Conditions)
    /// `PUT /v1/views/{name}`: define the view (with `epoch` when it does not exist) or replace its definition,
    /// given as its canonical JSON. `versionsEveryDefinition`: another definition commits a view version even
    /// with the same content (`LiveView.redefine`), as every record written since 2026-12-05 asks
    /// (`RecordCodec.Kind.defineViewVersioned`); records written before (`Kind.defineView`) kept the version, and
    /// are replayed as they were applied, so that the versions clients hold go on naming the same content.
    case defineView(
        view: String, epoch: String, definition: JSONData, conditions: Conditions, versionsEveryDefinition: Bool = true)
    /// `DELETE /v1/views/{name}`.
    case deleteView(view: String, conditions: Conditions)

    /// The request's `If-Match` and `If-None-Match`, checked when the record is applied.
    struct Conditions: Sendable, Equatable {
        var ifMatch: String?
        var ifNoneMatch: String?

        static let none = Conditions()
    }

    /// The collection or view the record writes to.
    var name: String {
        switch self {
        case .put(let collection, _, _, _), .ops(let collection, _, _), .upsert(let collection, _, _, _, _, _, _),
            .delete(let collection, _):
            collection
        case .defineView(let view, _, _, _, _), .deleteView(let view, _):
            view
        }
    }

    /// Whether the record only deletes (a collection, a view, sections or items): what is still taken below the
    /// disk reserve from a small body (`App.checkDiskSpace`).
    var onlyDeletes: Bool {
        switch self {
        case .delete, .deleteView:
            return true
        case .ops(_, let ops, _):
            return !ops.isEmpty
                && ops.allSatisfy { op in
                    switch op {
                    case .deleteSections, .deleteItems: true
                    default: false
                    }
                }
        case .put, .upsert, .defineView:
            return false
        }
    }

    /// The view the record defines (or redefines, maybe on another source); nil for every other record.
    var definedView: String? {
        if case .defineView(let view, _, _, _, _) = self { return view }
        return nil
    }

    /// Whether the record deletes a collection (`DELETE /v1/collections/{name}`).
    var deletesCollection: Bool {
        if case .delete = self { return true }
        return false
    }
}

/// The binary form of journal records (see the README's "Durability" section for the framing around it).
enum RecordCodec {
    enum Kind: UInt8 {
        case put = 1
        case ops = 2
        case upsert = 3
        case delete = 4
        /// A definition that keeps the view's version when the content stays (written before 2026-12-05).
        case defineView = 5
        case deleteView = 6
        /// A definition that commits a version whenever the definition changes.
        case defineViewVersioned = 7
        /// An upsert naming section `"default"`, which it creates in a collection with no section (written since
        /// 2026-12-06; such an upsert written before is `upsert`, and was refused there). Only these upserts take
        /// the new kind, so that a build before can still read every other.
        case upsertNamingDefault = 8

        /// Whether an encoded record of this first byte defines a view.
        static func definesView(_ byte: UInt8?) -> Bool {
            byte == defineView.rawValue || byte == defineViewVersioned.rawValue
        }
    }

    private enum OpKind: UInt8 {
        case insertSections = 1
        case deleteSections
        case moveSection
        case updateSection
        case insertItems
        case deleteItems
        case moveItem
        case updateItems
    }

    static func encode(_ record: JournalRecord) -> [UInt8] {
        var writer = BinaryWriter()
        switch record {
        case .put(let collection, let epoch, let sections, let conditions):
            writer.byte(Kind.put.rawValue)
            header(&writer, collection, conditions)
            writer.string(epoch)
            writer.sections(sections)
        case .ops(let collection, let ops, let conditions):
            writer.byte(Kind.ops.rawValue)
            header(&writer, collection, conditions)
            writer.uint32(UInt32(ops.count))
            for op in ops { encode(op, into: &writer) }
        case .upsert(let collection, let id, let data, let section, let index, let conditions, let refuses):
            let namesDefault = section == .id(VersionedCollection.firstSectionID) && !refuses
            writer.byte(namesDefault ? Kind.upsertNamingDefault.rawValue : Kind.upsert.rawValue)
            header(&writer, collection, conditions)
            writer.string(id)
            writer.blob(data.bytes)
            writer.byte(section == nil ? 0 : 1)
            if let section { encode(section, into: &writer) }
            writer.byte(index == nil ? 0 : 1)
            if let index { writer.int(index) }
        case .delete(let collection, let conditions):
            writer.byte(Kind.delete.rawValue)
            header(&writer, collection, conditions)
        case .defineView(let view, let epoch, let definition, let conditions, let versionsEveryDefinition):
            writer.byte(versionsEveryDefinition ? Kind.defineViewVersioned.rawValue : Kind.defineView.rawValue)
            header(&writer, view, conditions)
            writer.string(epoch)
            writer.blob(definition.bytes)
        case .deleteView(let view, let conditions):
            writer.byte(Kind.deleteView.rawValue)
            header(&writer, view, conditions)
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(BinaryReader.Malformed) -> JournalRecord {
        var reader = BinaryReader(bytes)
        guard let kind = Kind(rawValue: try reader.byte()) else { throw BinaryReader.Malformed() }
        let collection = try reader.string()
        let conditions = JournalRecord.Conditions(
            ifMatch: try reader.optionalString(), ifNoneMatch: try reader.optionalString())
        let record: JournalRecord
        switch kind {
        case .put:
            record = .put(
                collection: collection, epoch: try reader.string(), sections: try reader.sections(),
                conditions: conditions)
        case .ops:
            let count = try reader.count(minimumSize: 1)
            var ops: [Op] = []
            for _ in 0..<count { ops.append(try decodeOp(&reader)) }
            record = .ops(collection: collection, ops: ops, conditions: conditions)
        case .upsert, .upsertNamingDefault:
            let id = try reader.string()
            let data = JSONData(canonical: try reader.blob())
            let section = try reader.byte() == 0 ? nil : try decodeSectionRef(&reader)
            let index = try reader.byte() == 0 ? nil : try reader.int()
            let namesDefault = section == .id(VersionedCollection.firstSectionID)
            guard namesDefault || kind == .upsert else { throw BinaryReader.Malformed() }
            record = .upsert(
                collection: collection, id: id, data: data, section: section, index: index, conditions: conditions,
                refusesMissingDefault: namesDefault && kind == .upsert)
        case .delete:
            record = .delete(collection: collection, conditions: conditions)
        case .defineView, .defineViewVersioned:
            record = .defineView(
                view: collection, epoch: try reader.string(), definition: JSONData(canonical: try reader.blob()),
                conditions: conditions, versionsEveryDefinition: kind == .defineViewVersioned)
        case .deleteView:
            record = .deleteView(view: collection, conditions: conditions)
        }
        guard reader.isAtEnd else { throw BinaryReader.Malformed() }
        return record
    }

    private static func header(
        _ writer: inout BinaryWriter, _ collection: String, _ conditions: JournalRecord.Conditions
    ) {
        writer.string(collection)
        writer.optionalString(conditions.ifMatch)
        writer.optionalString(conditions.ifNoneMatch)
    }

    private static func encode(_ op: Op, into writer: inout BinaryWriter) {
        switch op {
        case .insertSections(let at, let sections):
            writer.byte(OpKind.insertSections.rawValue)
            writer.int(at)
            writer.sections(sections)
        case .deleteSections(let refs):
            writer.byte(OpKind.deleteSections.rawValue)
            writer.uint32(UInt32(refs.count))
            for ref in refs { encode(ref, into: &writer) }
        case .moveSection(let ref, let to):
            writer.byte(OpKind.moveSection.rawValue)
            encode(ref, into: &writer)
            writer.int(to)
        case .updateSection(let ref, let data):
            writer.byte(OpKind.updateSection.rawValue)
            encode(ref, into: &writer)
            writer.blob(data.bytes)
        case .insertItems(let at, let items):
            writer.byte(OpKind.insertItems.rawValue)
            encode(at, into: &writer)
            writer.items(items)
        case .deleteItems(let refs):
            writer.byte(OpKind.deleteItems.rawValue)
            writer.uint32(UInt32(refs.count))
            for ref in refs { encode(ref, into: &writer) }
        case .moveItem(let ref, let to):
            writer.byte(OpKind.moveItem.rawValue)
            encode(ref, into: &writer)
            encode(to, into: &writer)
        case .updateItems(let items):
            writer.byte(OpKind.updateItems.rawValue)
            writer.items(items)
        }
    }

    private static func decodeOp(_ reader: inout BinaryReader) throws(BinaryReader.Malformed) -> Op {
        guard let kind = OpKind(rawValue: try reader.byte()) else { throw BinaryReader.Malformed() }
        switch kind {
        case .insertSections:
            return .insertSections(at: try reader.int(), sections: try reader.sections())
        case .deleteSections:
            let count = try reader.count(minimumSize: 2)
            var refs: [SectionRef] = []
            for _ in 0..<count { refs.append(try decodeSectionRef(&reader)) }
            return .deleteSections(refs)
        case .moveSection:
            return .moveSection(try decodeSectionRef(&reader), to: try reader.int())
        case .updateSection:
            return .updateSection(try decodeSectionRef(&reader), data: JSONData(canonical: try reader.blob()))
        case .insertItems:
            return .insertItems(at: try decodePosition(&reader), items: try reader.items())
        case .deleteItems:
            let count = try reader.count(minimumSize: 2)
            var refs: [ItemRef] = []
            for _ in 0..<count { refs.append(try decodeItemRef(&reader)) }
            return .deleteItems(refs)
        case .moveItem:
            return .moveItem(try decodeItemRef(&reader), to: try decodePosition(&reader))
        case .updateItems:
            return .updateItems(try reader.items())
        }
    }

    private static func encode(_ ref: SectionRef, into writer: inout BinaryWriter) {
        switch ref {
        case .index(let index):
            writer.byte(0)
            writer.int(index)
        case .id(let id):
            writer.byte(1)
            writer.string(id)
        }
    }

    private static func decodeSectionRef(_ reader: inout BinaryReader) throws(BinaryReader.Malformed) -> SectionRef {
        switch try reader.byte() {
        case 0: return .index(try reader.int())
        case 1: return .id(try reader.string())
        default: throw BinaryReader.Malformed()
        }
    }

    private static func encode(_ ref: ItemRef, into writer: inout BinaryWriter) {
        switch ref {
        case .id(let id):
            writer.byte(0)
            writer.string(id)
        case .path(let section, let index):
            writer.byte(1)
            encode(section, into: &writer)
            writer.int(index)
        }
    }

    private static func decodeItemRef(_ reader: inout BinaryReader) throws(BinaryReader.Malformed) -> ItemRef {
        switch try reader.byte() {
        case 0: return .id(try reader.string())
        case 1: return .path(try decodeSectionRef(&reader), try reader.int())
        default: throw BinaryReader.Malformed()
        }
    }

    private static func encode(_ position: ItemPosition, into writer: inout BinaryWriter) {
        encode(position.section, into: &writer)
        writer.int(position.index)
    }

    private static func decodePosition(_ reader: inout BinaryReader) throws(BinaryReader.Malformed) -> ItemPosition {
        ItemPosition(section: try decodeSectionRef(&reader), index: try reader.int())
    }
}

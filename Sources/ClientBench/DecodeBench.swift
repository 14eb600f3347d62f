import ChangeFeedClient
import Foundation
import Model

/// Decoding a feed answer of about 1 MB (a changeset of inserted items with object data) into Model's values,
/// next to `JSONSerialization` alone parsing the same bytes into Foundation objects (no checking, no values).
enum DecodeBench {
    static func answer() -> [UInt8] {
        var inserted: [String] = []
        var index = 0
        var size = 0
        while size < 1_000_000 {
            let entry =
                #"{"at":[0,\#(index)],"id":"item-\#(index)","data":{"title":"Item number \#(index)","#
                + #""done":false,"priority":\#(index % 5),"tags":["a","b"]}}"#
            inserted.append(entry)
            size += entry.utf8.count + 1
            index += 1
        }
        let body =
            #"{"collection":"bench","from":"e.1","to":"e.2","changes":{"from":"e.1","to":"e.2","#
            + #""sections":{"deleted":[],"inserted":[],"moved":[],"updated":[]},"#
            + #""items":{"deleted":[],"inserted":[\#(inserted.joined(separator: ","))],"moved":[],"updated":[]}}}"#
        return Array(body.utf8)
    }

    static func run() {
        let bytes = answer()
        let data = Data(bytes)
        print("== decode: a \(bytes.count)-byte changeset answer")
        do {
            let ours = try Timing.median(15) { consume(try FeedEvent(decoding: bytes)) }
            let baseline = try Timing.median(15) { consume(try JSONSerialization.jsonObject(with: data)) }
            print(
                "  FeedEvent(decoding:) median \(Timing.format(ours)); JSONSerialization alone \(Timing.format(baseline)); "
                    + "ratio \(String(format: "%.2f", ours / baseline))")
        } catch {
            print("  failed: \(error)")
            exit(1)
        }
    }
}

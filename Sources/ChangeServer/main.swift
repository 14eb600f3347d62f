import Glibc

var environment: [String: String] = [:]
var cursor = environ
while let entry = cursor.pointee {
    let text = String(cString: entry)
    if let equals = text.firstIndex(of: "=") {
        environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
    }
    cursor += 1
}
exit(Lifecycle.run(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment))

import ArgumentParser

struct PayloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "payload", abstract: "Not yet implemented.")
    func run() async throws { throw ValidationError("salvo payload is not implemented yet") }
}

import ArgumentParser

struct MockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mock", abstract: "Not yet implemented.")
    func run() async throws { throw ValidationError("salvo mock is not implemented yet") }
}

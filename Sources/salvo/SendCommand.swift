import ArgumentParser

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "send", abstract: "Not yet implemented.")
    func run() async throws { throw ValidationError("salvo send is not implemented yet") }
}

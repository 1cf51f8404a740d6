import ArgumentParser
import SalvoPostgres

/// `--db` and `--app-id` of `salvo send --target blackberry`: the device registry that
/// learns the run's dead tokens (402 Invalid Token).
struct PushChannelRegistryOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Record the tokens the NOC answers 402 Invalid Token for as dead in the device registry of this "
                               + "database (with --app-id).", valueName: "url"))
    var db: String?

    @Option(name: .customLong("app-id"),
            help: ArgumentHelp("The BlackBerry Dynamics app id the tokens belong to: their topic in the registry.", valueName: "id"))
    var appID: String?

    /// The flag that was given when it should not have been (for APNs).
    var givenFlag: String? { firstGivenFlag([("--db", db != nil), ("--app-id", appID != nil)]) }

    func check() throws {
        guard let db else {
            if appID != nil { throw ValidationError("--app-id goes with --db URL") }
            return
        }
        do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
        guard let appID, !appID.isEmpty else {
            throw ValidationError("--db needs the tokens' --app-id ID (the BlackBerry Dynamics app id)")
        }
    }
}


/// Where application icons are kept (in the store's icon table, under these keys). An icon uploaded with
/// a broadcast belongs to the account that uploaded it; the application's own icon, shown in the
/// directory for every account, is the one the operator verified.
package enum ApplicationIcons {
    package static func verifiedKey(_ applicationID: String) -> String { "verified/" + applicationID }
    /// The largest icon accepted, uploaded or verified.
    package static let maximumBytes = 256 << 10
    package static func accountKey(_ applicationID: String, userID: Int64) -> String { "user/\(userID)/" + applicationID }
}

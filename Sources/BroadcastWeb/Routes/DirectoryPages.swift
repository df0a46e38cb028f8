import BroadcastMedia
import BroadcastStore
import Foundation
import Hummingbird

/// The pages that show what is live: the front page (every live broadcast, grouped by application) and
/// an application's page (its live broadcasts). Each broadcast is a card: its live thumbnail, title,
/// broadcaster, application icon and name, viewer count and how long it has been live.
/// `/static/directory.js` refreshes the thumbnails every 10 s and the counts and times as they change.
extension PageRoutes {
    func directoryPage(_ request: Request, context: Context) async throws -> Response {
        let user = context.user
        let csrf = web.csrfToken(request)
        let now = Date().timeIntervalSince1970
        let groups = Dictionary(grouping: await web.directory.listing()) { $0.record.application.id }
        // The application with the most live first; ties by name, so the order is stable between loads.
        let sorted = groups.values.sorted {
            $0.count != $1.count ? $0.count > $1.count : $0[0].record.application.name < $1[0].record.application.name
        }
        let sections = sorted.map { broadcasts -> String in
            let app = broadcasts[0].record.application
            return """
            <section class="app" data-app="\(HTML.escape(app.id))"><h2><a href="\(Self.applicationPath(app.id))">\
            <img class="app-icon" src="\(Self.iconPath(app.id))" alt="" width="32" height="32">\
            <span class="name">\(HTML.escape(app.name))</span></a> <span class="count">\(broadcasts.count) live</span></h2>
            <ul class="cards">\(broadcasts.map { Self.card($0, now: now) }.joined())</ul></section>
            """
        }
        let body = "<h1>Live now</h1><div id=\"live\">" + (sections.isEmpty
            ? "<p class=\"empty\">Nobody is live. Publish with ffmpeg or OBS to start.</p>" : sections.joined()) + "</div>"
        return web.html(HTML.page(title: "Live", user: user?.name, csrf: csrf.0, body: body + Self.directoryScript), csrf: csrf)
    }

    func applicationPage(_ request: Request, context: Context, applicationID: String) async throws -> Response {
        let user = context.user
        let csrf = web.csrfToken(request)
        let now = Date().timeIntervalSince1970
        let broadcasts = await web.directory.listing().filter { $0.record.application.id == applicationID }
        let name = broadcasts.first?.record.application.name ?? applicationID
        let body = """
        <h1 class="app-title"><img class="app-icon" src="\(Self.iconPath(applicationID))" alt="" width="40" height="40"> \(HTML.escape(name))</h1>
        <div id="live" data-app="\(HTML.escape(applicationID))">
        """ + (broadcasts.isEmpty
            ? "<p class=\"empty\">Nobody is live with this application.</p>"
            : "<ul class=\"cards\">\(broadcasts.map { Self.card($0, now: now) }.joined())</ul>") + "</div>"
        return web.html(HTML.page(title: name, user: user?.name, csrf: csrf.0, body: body + Self.directoryScript), csrf: csrf)
    }

    static let directoryScript = "<script src=\"/static/directory.js\"></script>"

    /// The application's own icon (operator-verified, else a tile with its initial).
    static func iconPath(_ applicationID: String) -> String {
        HTML.escape("/icons/" + WebSupport.encodedPathSegment(applicationID))
    }

    /// The icon a broadcast shows: the verified one, else what its own account uploaded (never another's).
    static func iconPath(_ applicationID: String, userID: Int64) -> String {
        HTML.escape("/user-icons/\(userID)/" + WebSupport.encodedPathSegment(applicationID))
    }

    static func applicationPath(_ applicationID: String) -> String {
        HTML.escape("/apps/" + WebSupport.encodedPathSegment(applicationID))
    }

    /// One live broadcast's card.
    static func card(_ broadcast: LiveListing, now: Double) -> String {
        let record = broadcast.record
        let id = HTML.escape(record.id)
        let started = record.startedAt ?? now
        return """
        <li class="live-card" data-id="\(id)" data-started="\(Int(started * 1000))">\
        <a class="thumb" href="/b/\(id)"><img class="thumbnail" src="/b/\(id)/thumbnail.jpg" alt="" width="480" height="270">\
        <span class="badge">LIVE</span><span class="uptime">\(LiveDuration.text(seconds: now - started))</span></a>
        <div class="meta"><img class="app-icon" src="\(iconPath(record.application.id, userID: record.userID))" alt="" width="36" height="36">\
        <div><a class="title" href="/b/\(id)">\(HTML.escape(record.title))</a>
        <div class="broadcaster">\(HTML.escape(broadcast.broadcaster))</div>
        <div class="details"><a class="app-name" href="\(applicationPath(record.application.id))">\(HTML.escape(record.application.name))</a> · \
        <span class="viewers">\(broadcast.viewerCount)</span> watching</div></div></div></li>
        """
    }
}

/// How long a broadcast has been live, as a card shows it: `0:42`, `12:03`, `1:02:03`.
/// (`/static/directory.js` formats the same way as the time goes on.)
enum LiveDuration {
    static func text(seconds: Double) -> String {
        let total = max(0, Int(seconds.rounded(.down)))
        let (hours, minutes, secs) = (total / 3600, total / 60 % 60, total % 60)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return hours > 0 ? "\(hours):\(two(minutes)):\(two(secs))" : "\(minutes):\(two(secs))"
    }
}

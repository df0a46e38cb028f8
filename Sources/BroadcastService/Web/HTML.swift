/// Server-rendered pages. Every piece of user text goes through `escape`.
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    static func page(title: String, user: String?, csrf: String, body: String) -> String {
        let account = user.map { name in
            """
            <span>Signed in as <b>\(escape(name))</b></span> · <a href="/account">Account</a>
            <form method="post" action="/signout" class="inline"><input type="hidden" name="csrf" value="\(escape(csrf))"><button>Sign out</button></form>
            """
        } ?? #"<a href="/signin">Sign in</a> · <a href="/signup">Sign up</a>"#
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) · OpenReplayKit</title><link rel="stylesheet" href="/static/style.css"></head>
        <body><header><a href="/" class="brand">OpenReplayKit Live</a><nav>\(account)</nav></header>
        <main>\(body)</main></body></html>
        """
    }

    static func form(action: String, csrf: String, submit: String, fields: [(name: String, label: String, type: String)], error: String?) -> String {
        let inputs = fields.map { f in
            #"<label>\#(escape(f.label)) <input name="\#(escape(f.name))" type="\#(escape(f.type))" required></label>"#
        }.joined(separator: "\n")
        return """
        \(error.map { "<p class=\"error\">\(escape($0))</p>" } ?? "")
        <form method="post" action="\(escape(action))" class="card">
        <input type="hidden" name="csrf" value="\(escape(csrf))">
        \(inputs)
        <button type="submit">\(escape(submit))</button></form>
        """
    }

    static let style = """
    body{font-family:system-ui,sans-serif;margin:0;background:#111;color:#eee}
    header{display:flex;justify-content:space-between;align-items:center;padding:.6em 1em;background:#222}
    a{color:#8cf}.brand{font-weight:bold;color:#fff;text-decoration:none}main{padding:1em;max-width:1100px;margin:auto}
    .apps,.list{display:flex;flex-wrap:wrap;gap:1em;padding:0;list-style:none}.apps li,.list li{background:#222;padding:.8em;border-radius:8px}
    .apps img{width:48px;height:48px;vertical-align:middle;margin-right:.5em}.card{display:grid;gap:.6em;max-width:360px}
    .inline{display:inline}.error{color:#f88}video,#screen{width:100%;max-height:70vh;background:#000;object-fit:contain}
    #side{display:grid;grid-template-columns:2fr 1fr;gap:1em}#chat{list-style:none;padding:0;height:50vh;overflow-y:auto;background:#1a1a1a}
    #chat li{padding:.2em .4em}#chat b{color:#fc8;margin-right:.4em}code{background:#222;padding:.1em .3em}
    """
}

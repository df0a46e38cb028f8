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
}

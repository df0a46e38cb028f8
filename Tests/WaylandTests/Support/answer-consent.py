#!/usr/bin/python3
"""Answers replayd's consent prompt (replay-ui consent, a GTK 4 Wayland window) through AT-SPI, as a
person with a screen reader would: finds the application "openreplaykit-consent" on the
accessibility bus, reads its question, presses the button named LABEL (default "Allow").

    answer-consent.py [--timeout SECONDS] [--press LABEL]

Prints 'question: …' and 'pressed LABEL'; exit 0 once the prompt has gone. On failure exits 1 and
prints what it saw on standard error. Run it with the session's environment."""
import argparse
import sys
import time
import warnings

import gi
gi.require_version('Atspi', '2.0')
from gi.repository import Atspi, GLib
from accessible import log, children, walk, role, name

warnings.filterwarnings('ignore', category=DeprecationWarning)

APP = 'openreplaykit-consent'


def prompts():
    found = []
    for app in children(Atspi.get_desktop(0)):
        if name(app) != APP:
            continue
        found += [w for w in children(app) if role(w) in ('frame', 'dialog', 'window', 'alert') and children(w)]
    return found


def text_of(window):
    return [name(n) for _, n in walk(window) if role(n) in ('label', 'static', 'heading') and name(n)]


def press(window, label):
    for _, node in walk(window):
        if role(node) == 'push button' and name(node) == label:
            action = node.get_action_iface()
            for i in range(action.get_n_actions() if action else 0):
                if action.get_action_name(i) in ('click', 'activate', 'press'):
                    return action.do_action(i)
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--timeout', type=float, default=60)
    parser.add_argument('--press', default='Allow')
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    began = time.monotonic()
    while not prompts():
        if time.monotonic() >= deadline:
            log('no consent prompt (%s) on the accessibility bus within %.0f s; applications there: %r'
                % (APP, args.timeout, [name(a) for a in children(Atspi.get_desktop(0))]))
            sys.exit(1)
        time.sleep(0.2)
    window = prompts()[0]
    print('prompt after %.1f s; question: %s' % (time.monotonic() - began, ' | '.join(text_of(window))), flush=True)
    if not press(window, args.press):
        log('no %r button to press:\n%s' % (args.press, '\n'.join('  ' * d + '%s %r' % (role(n), name(n)) for d, n in walk(window))))
        sys.exit(1)
    print('pressed %s' % args.press, flush=True)
    deadline = time.monotonic() + 15
    while prompts():
        if time.monotonic() >= deadline:
            log('the prompt is still there after pressing %s' % args.press)
            sys.exit(1)
        time.sleep(0.2)
    print('the prompt closed', flush=True)


if __name__ == '__main__':
    main()

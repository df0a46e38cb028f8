#!/usr/bin/python3
"""Answers xdg-desktop-portal-gnome's screen-cast dialog through AT-SPI, as a person with a screen
reader would: selects the monitor's row under "Entire Screen" and presses Share.

    answer-portal.py [--timeout SECONDS] [--monitor NAME]   wait for the dialog, answer it; exit 0 once
                                                            Share was pressed and the dialog has gone
    answer-portal.py --expect-none SECONDS                  exit 0 if no dialog shows within SECONDS
    answer-portal.py --cancel [--timeout SECONDS]           press Cancel instead

Run it with the session's environment (DBUS_SESSION_BUS_ADDRESS: the accessibility bus is found
through it). On failure it exits 1 and prints what it saw (the applications on the accessibility bus
and the dialog's tree) on standard error."""
import argparse
import sys
import time
import warnings

import gi
gi.require_version('Atspi', '2.0')
from gi.repository import Atspi, GLib
from accessible import log, children, walk, role, name

# get_action_iface and friends are deprecated in at-spi2-core 2.46 for names Debian 12's pyatspi lacks.
warnings.filterwarnings('ignore', category=DeprecationWarning)

PORTAL_APP = 'xdg-desktop-portal-gnome'


def states(node):
    try:
        state_set = node.get_state_set()
        return {Atspi.StateType(s).value_nick for s in state_set.get_states()}
    except (GLib.Error, ValueError):
        return set()


def describe(node):
    return '\n'.join('  ' * d + '%s %r %s' % (role(n), name(n), sorted(states(n) & {'checked', 'selected', 'focused', 'showing'}))
                     for d, n in walk(node))


def applications():
    desktop = Atspi.get_desktop(0)
    return children(desktop)


def dialogs():
    """The portal's windows that show: xdg-desktop-portal-gnome keeps its application on the bus
    after a dialog has closed, with no window."""
    found = []
    for app in applications():
        if PORTAL_APP not in name(app).lower():
            continue
        for window in children(app):
            if role(window) in ('frame', 'dialog', 'window') and children(window):
                found.append(window)
    return found


def wait_for_dialog(timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = dialogs()
        if found:
            return found[0]
        time.sleep(0.2)
    log('no screen-share dialog of %s on the accessibility bus within %.0f s; applications there: %r'
        % (PORTAL_APP, timeout, [name(a) for a in applications()]))
    sys.exit(1)


def act(node, names=('click', 'activate', 'press', 'toggle', 'select')):
    action = node.get_action_iface()
    if action is None:
        return False
    for i in range(action.get_n_actions()):
        if action.get_action_name(i) in names:
            return action.do_action(i)
    return False


def select_monitor(dialog, monitor):
    """Selects the monitor's row (the first one under "Entire Screen", or the one whose text has
    `monitor`), as a click on it would."""
    rows = []
    for _, node in walk(dialog):
        if role(node) in ('list item', 'table row', 'radio button', 'toggle button'):
            text = ' '.join(name(n) for _, n in walk(node))
            if monitor is None or monitor in text:
                rows.append((node, text))
    if not rows:
        return False, 'no row to select'
    row, text = rows[0]
    if 'selected' in states(row) or 'checked' in states(row):
        return True, 'row %r already selected' % text
    acted = act(row)
    parent = row.get_parent()
    selected = False
    try:
        selection = parent.get_selection_iface() if parent is not None else None
        if selection is not None:
            selected = selection.select_child(row.get_index_in_parent())
    except GLib.Error as error:
        log('selection interface:', error.message)
    return acted or selected, 'row %r (action %s, selection %s)' % (text, acted, selected)


def press(dialog, label):
    buttons = [n for _, n in walk(dialog) if role(n) == 'push button' and label in name(n)]
    if not buttons:
        return False
    return act(buttons[0], ('click', 'activate', 'press'))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--timeout', type=float, default=60, help='seconds to wait for the dialog')
    parser.add_argument('--monitor', help="text of the monitor's row (default: the first row)")
    parser.add_argument('--expect-none', type=float, metavar='SECONDS', help='check that no dialog shows')
    parser.add_argument('--cancel', action='store_true', help='press Cancel instead of Share')
    args = parser.parse_args()

    if args.expect_none is not None:
        deadline = time.monotonic() + args.expect_none
        while time.monotonic() < deadline:
            found = dialogs()
            if found:
                log('a screen-share dialog showed, none was expected:\n' + describe(found[0]))
                sys.exit(1)
            time.sleep(0.2)
        print('no dialog in %.0f s' % args.expect_none, flush=True)
        return

    began = time.monotonic()
    dialog = wait_for_dialog(args.timeout)
    print('dialog %r after %.1f s' % (name(dialog), time.monotonic() - began), flush=True)
    if args.cancel:
        if not press(dialog, 'Cancel'):
            log('no Cancel button to press:\n' + describe(dialog))
            sys.exit(1)
    else:
        remember = [n for _, n in walk(dialog) if role(n) == 'check box' and 'Remember' in name(n)]
        if remember:
            print('"Remember this selection" is %s' % ('checked' if 'checked' in states(remember[0]) else 'not checked'), flush=True)
        # The dialog's list fills in as the portal hears of the monitors: try for a few seconds.
        deadline = time.monotonic() + 10
        while True:
            selected, what = select_monitor(dialog, args.monitor)
            if selected or time.monotonic() >= deadline:
                break
            time.sleep(0.3)
        print('selected:', what, flush=True)
        if not selected:
            log('could not select a monitor:\n' + describe(dialog))
            sys.exit(1)
        # Share is sensitive once a row is selected.
        deadline = time.monotonic() + 10
        while True:
            buttons = [n for _, n in walk(dialog) if role(n) == 'push button' and 'Share' in name(n)]
            if buttons and ('sensitive' in states(buttons[0]) or time.monotonic() >= deadline):
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not press(dialog, 'Share'):
            log('no Share button to press:\n' + describe(dialog))
            sys.exit(1)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not dialogs():
            print('%s pressed; the dialog closed after %.1f s' % ('Cancel' if args.cancel else 'Share', time.monotonic() - began), flush=True)
            return
        time.sleep(0.2)
    found = dialogs()
    log('the dialog is still there after pressing:\n' + (describe(found[0]) if found else '(gone)'))
    sys.exit(1)


if __name__ == '__main__':
    main()

"""What the AT-SPI helpers share: walking an application's accessible tree as a screen reader does.
Imported by answer-portal.py, answer-consent.py and stop-sharing.py (their folder is on sys.path)."""
import sys

import gi
gi.require_version('Atspi', '2.0')
from gi.repository import GLib


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def children(node):
    try:
        return [c for c in (node.get_child_at_index(i) for i in range(node.get_child_count())) if c is not None]
    except GLib.Error:
        return []


def walk(node, depth=0):
    yield depth, node
    for child in children(node):
        yield from walk(child, depth + 1)


def role(node):
    try:
        return node.get_role_name()
    except GLib.Error:
        return '?'


def name(node):
    try:
        return node.get_name() or ''
    except GLib.Error:
        return ''

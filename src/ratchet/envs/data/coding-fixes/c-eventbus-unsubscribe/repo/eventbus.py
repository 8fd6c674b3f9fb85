"""A minimal publish/subscribe event bus.

subscribe(event, handler) registers handler and returns a function that,
when called, unregisters exactly that handler. publish(event, payload)
calls the event's handlers in the order they subscribed.
"""
from collections import defaultdict


class EventBus:
    def __init__(self):
        self._handlers = defaultdict(list)

    def subscribe(self, event, handler):
        self._handlers[event].append(handler)

        def unsubscribe():
            handlers = self._handlers[event]
            if handler in handlers:
                handlers.pop()

        return unsubscribe

    def publish(self, event, payload=None):
        for handler in list(self._handlers[event]):
            handler(payload)

from eventbus import EventBus


def test_publish_in_subscription_order():
    bus, seen = EventBus(), []
    bus.subscribe("save", lambda p: seen.append(("a", p)))
    bus.subscribe("save", lambda p: seen.append(("b", p)))
    bus.publish("save", 1)
    assert seen == [("a", 1), ("b", 1)]


def test_unsubscribe_only_handler():
    bus, seen = EventBus(), []
    off = bus.subscribe("save", seen.append)
    off()
    bus.publish("save", 1)
    assert seen == []


def test_unsubscribe_first_of_two_handlers():
    bus, seen = EventBus(), []
    off_a = bus.subscribe("save", lambda p: seen.append("a"))
    bus.subscribe("save", lambda p: seen.append("b"))
    off_a()
    bus.publish("save")
    assert seen == ["b"]

"""The GIL is released in long calls: another Python thread runs while one thread
is inside backward. Python's switch interval is set far beyond the test's length,
so a thread holding the GIL is never asked to give it up: the counter thread can
advance between the two reads only if backward let go of the GIL."""
import sys
import threading
import time

import dtr
import dtr.nn as nn


def counter_progress_during(fn):
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)  # gives the GIL back to the worker when it wants it

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    t = threading.Thread(target=count)
    try:
        t.start()
        while counter[0] == 0:
            time.sleep(0.001)
        before = counter[0]
        fn()
        after = counter[0]
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(interval)
    return after - before


def long_graph():
    dtr.manual_seed(0)
    net = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])
    loss = net(dtr.randn(1024, 512)).pow(2).mean()
    return net, loss


def test_backward_releases_the_gil():
    net, loss = long_graph()
    assert counter_progress_during(loss.backward) > 0


def test_optimizer_step_releases_the_gil():
    net, loss = long_graph()
    loss.backward()
    opt = dtr.optim.AdamW(net.parameters(), lr=1e-3)
    assert counter_progress_during(opt.step) > 0


def test_a_tiny_op_keeps_the_gil():
    # The control: a call that holds the GIL lets the counter thread make no progress.
    x = dtr.ones(1)
    assert counter_progress_during(lambda: [x + x for _ in range(1000)]) == 0


def test_threads_train_their_own_models_at_once():
    results = {}

    def train(i):
        dtr.manual_seed(i)  # the generator is per process: seeds only what this thread draws first
        net = nn.Linear(32, 1)
        opt = dtr.optim.SGD(net.parameters(), lr=0.01)
        x = dtr.ones(16, 32)
        for _ in range(20):
            loss = net(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        results[i] = loss.item()

    threads = [threading.Thread(target=train, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(v == v for v in results.values())

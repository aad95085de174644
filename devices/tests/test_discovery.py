from __future__ import annotations

from devices.discovery import discover


def test_it_finds_the_emulator_on_loopback(tiiny):
    found = discover(targets=[("127.0.0.1", tiiny.udp_port)], window_s=0.5)
    assert len(found) == 1
    device = found[0]
    assert device.serial.startswith("TNY")
    assert device.name
    assert device.usb == "172.17.7.177"
    assert "127.0.0.1" in device.wifi
    assert device.url == tiiny.base_url  # the address that answered, on the API port


def test_it_finds_nothing_where_nobody_answers():
    import socket

    from devices.emulator.testing import free_port

    assert discover(targets=[("127.0.0.1", free_port(kind=socket.SOCK_DGRAM))], window_s=0.2) == []

"""A command started in the background still stops on SIGINT."""
import signal

from driple.cli import main


def test_a_background_command_gets_its_ctrl_c_back(capsys):
    """``cmd &`` / nohup start a process with SIGINT ignored (Python then installs no
    KeyboardInterrupt handler), so ``kill -INT`` used to do nothing to a background sweep."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert main(["settings"]) == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, old)
    capsys.readouterr()


def test_a_handler_someone_installed_is_left_alone(capsys):
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGINT, mine)
    try:
        assert main(["settings"]) == 0
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)
    capsys.readouterr()

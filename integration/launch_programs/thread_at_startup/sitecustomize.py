"""First on PYTHONPATH in fork_server_test: a thread alive in every interpreter from its start,
as some site setups (a metrics agent, a log shipper) leave one. The fork server must not fork
then: its ranks are exec'd, with one line saying why."""
import threading

threading.Thread(target=threading.Event().wait, name="site-agent", daemon=True).start()

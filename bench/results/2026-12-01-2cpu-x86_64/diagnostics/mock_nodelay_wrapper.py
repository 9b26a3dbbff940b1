# Diagnostic only: the shared mock with TCP_NODELAY on its sockets (not used for the comparison).
import importlib.util, sys
spec = importlib.util.spec_from_file_location("mock_llm", "/work/shared/bench/mock_llm.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
m.Handler.disable_nagle_algorithm = True
sys.exit(m.main(sys.argv[1:]))

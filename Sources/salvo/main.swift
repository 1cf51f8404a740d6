internal import CJemalloc
import SalvoWire
print("salvo")

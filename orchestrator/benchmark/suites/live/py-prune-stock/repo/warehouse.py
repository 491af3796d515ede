from inventory import prune, restock


class Warehouse:
    def __init__(self):
        self.stock = {}

    def receive(self, name, count):
        restock(self.stock, name, count)

    def tidy(self):
        return prune(self.stock)

print("ChangeServer")
